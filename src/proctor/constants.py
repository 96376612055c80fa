"""Constants shared across protocols, defined once."""

# Option letters of multiple-choice questions: A, B, C, ... (slice to the number of options).
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
