"""Scores a run or a log may hold, for the tests of the compiled passes against the careful
readers."""

#: Scores a run may hold: ties among them, long decimals that one double holds twice
#: (0.1 and 0.10000000000000001), exponents, zeros of both signs
SCORES = [
    "3",
    "2.5",
    "2.50",
    "0.1",
    "0.10000000000000001",
    "0.30000000000000004",
    "0.123456789012345678",
    "1e-3",
    "0.001",
    "2.5E+2",
    "250",
    "-0.0",
    "0",
    "-1.75",
    "123456789.123456789",
]
