import Mathlib.Data.Nat.Defs
import Demo.Defs

/-!
# Facts for the LeanDojo conversion tests

Each declaration exercises one rule of `sgs/state/leandojo.py`.
-/

open Nat

universe u

namespace Demo

variable {α : Type u}

/-- Doubling is adding. -/
@[simp]
theorem double_eq_add (n : ℕ) : double n = n + n := by
  unfold double
  omega

theorem add_zero' (n : ℕ) : n + 0 = n := by
  sorry

/-- A term-mode proof, stated as a lemma: LeanDojo's span of a `lemma` starts
at its docstring. -/
@[simp] lemma zero_add' (n : ℕ) :
    0 + n = n :=   -- the proof follows
  Nat.zero_add n

theorem length_self (l : List α) : l.length = l.length := rfl

def triple (n : ℕ) : ℕ := 3 * n

theorem triple_zero : triple 0 = 0 := by
  simp [triple]

theorem let_in_type (x : ℕ) :
    let y := x + 1
    y = x + 1 := by
  intro y
  rfl

theorem mul_zero_eqns : ∀ n : ℕ, n * 0 = 0
  | 0 => rfl
  | n + 1 => by simp

open Finset in
theorem card_range (n : ℕ) : (range n).card = n := by
  sorry

local notation "𝟚" => (2 : ℕ)

theorem two_pos : 0 < 𝟚 := by
  decide

end Demo

section
variable (m : ℕ)

theorem le_succ_self' : m ≤ m + 1 := by omega

end

theorem abs_self_eq (a : ℤ) :
    |a| = |a| := by
  rfl
