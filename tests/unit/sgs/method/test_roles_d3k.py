"""The roles' text helpers over all 3,323 D3k targets (skipped without the data).

Set ``SGS_D3K_TARGETS`` to the JSON file (keys ``target_statements`` ->
``{id, header, theorem}``) where it lives elsewhere.
"""

import collections
import json
import os
from pathlib import Path

import pytest

from sgs.method.roles import CONJECTURE_NAME_PREFIX, canonical_form, has_disjunctive_conclusion

D3K = Path(os.environ.get("SGS_D3K_TARGETS", "/work/shared/data/d3k_targets.json"))

pytestmark = pytest.mark.skipif(not D3K.exists(), reason=f"D3k targets not found at {D3K}")


@pytest.fixture(scope="module")
def theorems() -> list[str]:
    return [target["theorem"] for target in json.loads(D3K.read_text())["target_statements"].values()]


def name_of(theorem: str) -> str:
    return theorem.split()[1]


def test_only_the_known_twins_are_equal_up_to_renaming(theorems):
    groups = collections.defaultdict(list)
    for theorem in theorems:
        groups[canonical_form(theorem, "lean")].append(name_of(theorem))
    twins = sorted(sorted(names) for names in groups.values() if len(names) > 1)
    assert twins == [
        ["a_gt_1_sufficient_not_necessary", "condition_property"],
        ["function_composition_value_184", "piecewise_function_composition_56"],
        ["lean_workbook_39850_2", "sum_of_two"],
    ]


def test_disjunctive_conclusions_are_rare(theorems):
    """The paper's baseline: under 10% of D3k conclusions are disjunctive."""
    share = sum(has_disjunctive_conclusion(theorem, "lean") for theorem in theorems) / len(theorems)
    assert 0 < share < 0.10


def test_conjecture_names_cannot_collide_with_target_names(theorems):
    assert not any(name_of(theorem).startswith(CONJECTURE_NAME_PREFIX) for theorem in theorems)
