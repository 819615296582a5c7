"""Scoring an end state: grading a patch in a fresh sandbox (`grade`), what a patch may touch
(`patch_policy`), the test runners' own verdicts (`runners`), reward functions (`verifiers`),
graded predictions files (`predictions`) and agreement with the official harness (`parity`)."""
