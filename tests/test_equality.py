"""rasp.equality.values_equal: the one output-equality function."""

from fractions import Fraction

import numpy as np

from rasp.equality import values_equal


def test_numbers_within_tolerance_strings_exact():
    assert values_equal(1 / 3, Fraction(1, 3))
    assert values_equal([0.1 + 0.2, 2], np.array([0.3, 2.0]))
    assert not values_equal([0.3], [0.3 + 1e-6])          # the REPL's old 1e-3 accepted this
    assert values_equal(True, 1) and not values_equal(True, 0)
    assert values_equal(np.array(["a", "b"]), ["a", "b"])
    assert not values_equal(["a", "b"], ["a", "c"])


def test_strings_never_equal_numbers_and_shapes_must_agree():
    assert not values_equal("0", 0)
    assert not values_equal(np.array(["1"]), np.array([1]))
    assert not values_equal([1, 2], [1, 2, 3])
    assert not values_equal(np.zeros((2, 3)), np.zeros((3, 2)))


def test_ragged_batches_and_mixed_object_arrays():
    assert values_equal([np.array([1, 2]), np.array([3])], [[1, 2], [3]])
    assert not values_equal([np.array([1, 2]), np.array([3])], [[1, 2], [4]])
    mixed = np.array([0, "a"], dtype=object)
    assert values_equal(mixed, [0, "a"]) and not values_equal(mixed, ["0", "a"])


def test_relative_tolerance_for_large_numbers():
    assert values_equal(1e12, 1e12 + 1)
    assert not values_equal(1e12, 1.001e12)
