import Mathlib.Data.Nat.Defs

/-- Twice a number. -/
def double (n : ℕ) : ℕ := 2 * n
