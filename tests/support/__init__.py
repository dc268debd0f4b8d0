"""Helpers the tests share: factories of rows, sample import files, AppTest sign-in."""
