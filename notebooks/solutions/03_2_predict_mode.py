def predict_faster_mode(in_features, out_features):
    """Exercise 3.2: predict the faster way to build the Jacobian of f: R^in -> R^out.

    Return ``"jacfwd"`` or ``"jacrev"``. jacfwd pushes one tangent per input
    dimension; jacrev pulls one cotangent per output dimension. (For a square
    Jacobian either answer is accepted.)
    """
    return "jacfwd" if out_features > in_features else "jacrev"
