from labkit.checks import Status, run_check


def test_solved():
    result = run_check("1.1", lambda: "well done")
    assert result.solved and str(result) == "✅ Exercise 1.1: solved. well done"


def test_stub_means_not_yet_solved():
    def stub():
        raise NotImplementedError("Exercise 1.1")

    result = run_check("1.1", stub)
    assert result.status is Status.NOT_YET and "not yet solved" in str(result)


def test_wrong_answer_shows_the_hint():
    def wrong():
        raise AssertionError("expected 3 rows, got 2")

    result = run_check("2.1", wrong)
    assert result.status is Status.WRONG and "expected 3 rows, got 2" in str(result)


def test_crash_in_learner_code_is_reported_not_raised():
    def crashing():
        return {}["missing"]

    result = run_check("3.1", crashing)
    assert result.status is Status.WRONG
    assert "KeyError" in result.message and "crashing" in result.message
    assert "<p>" in result._repr_html_()


def test_crash_inside_torch_points_at_the_learners_line():
    import torch

    def learner_code():
        x = torch.ones(2, 3)
        return torch.softmax(x, dim=5)  # the mistake is here, not in torch

    result = run_check("1.2", learner_code)
    assert result.status is Status.WRONG
    assert "of learner_code)" in result.message and "IndexError" in result.message
