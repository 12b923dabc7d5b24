def predict_strides(shape: tuple[int, ...], memory_format: str) -> tuple[int, ...]:
    """Exercise 2.1: the strides torch gives a new tensor of ``shape`` in ``memory_format``.

    ``memory_format`` is ``"contiguous_format"``, ``"channels_last"`` (4-D) or
    ``"channels_last_3d"`` (5-D). Work it out by hand, without creating a tensor:
    list the dimensions from innermost to outermost; the innermost has stride 1
    and each next one's stride is the previous stride times the previous size.
    """
    rank = len(shape)
    if memory_format == "contiguous_format":
        innermost_first = list(range(rank - 1, -1, -1))  # W, H, C, N
    else:
        innermost_first = [1, *range(rank - 1, 1, -1), 0]  # C, W, H, (D,) N
    strides = [0] * rank
    step = 1
    for dim in innermost_first:
        strides[dim] = step
        step *= shape[dim]
    return tuple(strides)
