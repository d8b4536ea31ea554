"""The eval's case files: their model (version 2, with ``topic`` and a ``world``), the files scored by
default and the share of cases each must get right, and how a file is loaded. ``evaluation`` scores them.

The files are development data, not part of the product: they live in the repository's ``evals/``
folder (``EVALS``), next to this package in a checkout, and are left out of the wheel."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

Category = Literal["change", "read", "ambiguous", "unsafe", "out_of_scope"]
AnswerKind = Literal["refuse", "clarify", "out_of_scope"]
MIN_CASES = 40
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: no turns, split or world
HELDOUT_TARGET = 0.95
DEV_OUTSIDER_TARGET = 0.95  # a floor under the measured score: a regression fails, the tuning is not hidden
DEV_OUTSIDER_2_TARGET = 0.97  # the same floor under the second outsider file's score after its tuning (183/187)
DEV_NEWCOMERS_TARGET = 0.9  # the newcomers' file (165/177 after its tuning): everyday words read least well
FRESH_HELDOUT_TARGET = 0.9  # issue 22: a held-out set written after the last tuning
Split = Literal["dev", "heldout"]


class _Own(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Expectation(_Own):
    """One acceptable outcome: a tool and its arguments, or no tool and the kind of answer."""

    tool: str | None
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    ignore: tuple[str, ...] = Field(default=(), description="Arguments that may be given or not, with any value.")
    answer: AnswerKind | None = None

    @model_validator(mode="after")
    def _shape(self) -> Expectation:
        if self.tool is None and (self.arguments or self.ignore or self.answer is None):
            raise ValueError("an expectation without a tool names its `answer` and no arguments")
        if self.tool is not None and self.answer is not None:
            raise ValueError("an expectation with a tool has no `answer`")
        return self


class Case(_Own):
    id: str
    category: Category
    topic: str | None = Field(default=None, description="What the case tries (add, relative, typo, ...).")
    request: str = Field(min_length=1)
    turns: tuple[str, ...] = Field(default=(), description="Earlier requests of the same conversation, in order.")
    offline: bool = Field(description="The offline interpreter is meant to handle this request.")
    expect: tuple[Expectation, ...] = Field(min_length=1, description="Acceptable outcomes, the preferred first.")


class CaseFile(_Own):
    version: int
    split: Split = "dev"
    description: str
    world: dict[str, JsonValue] = Field(default_factory=dict, description="What the server lists: clusters and pools.")
    cases: tuple[Case, ...] = Field(min_length=MIN_CASES)

    @model_validator(mode="after")
    def _unique(self) -> CaseFile:
        if self.version not in READABLE_VERSIONS:
            raise ValueError(f"case file version {self.version}; this code reads versions {READABLE_VERSIONS}")
        ids = Counter(case.id for case in self.cases)
        twice = sorted(i for i, n in ids.items() if n > 1)
        if twice:
            raise ValueError(f"case ids used twice: {', '.join(twice)}")
        return self


FROZEN_HELDOUT: tuple[str, ...] = (
    "eval_heldout_1.json",
    "eval_heldout_2.json",
    "eval_heldout_3.json",
    "eval_heldout_4.json",
    "eval_heldout_5.json",
    "eval_heldout_6.json",
)
"""Held-out files written by outsiders who never saw the code, each scored once after the tuning and then frozen:
not scored by default (``--cases`` scores one); the suite checks only that no case of theirs breaks a safety property."""

EVALS = Path(__file__).resolve().parents[2] / "evals"
"""The repository's case files. An installed wheel has no such folder: ``--cases`` names one."""

PACKAGED: dict[str, float] = {
    # The files of ``EVALS`` the command scores by default, and the share each must get right
    # (development files are deterministic regressions; the others are bars).
    "eval_cases.json": 1.0,
    "eval_heldout.json": HELDOUT_TARGET,
    "eval_dev_outsider.json": DEV_OUTSIDER_TARGET,
    "eval_dev_tuner.json": 1.0,
    "eval_dev_outsider_2.json": DEV_OUTSIDER_2_TARGET,
    # the third round's five outsider development files, each tuned on after its score on arrival
    "eval_dev_outsider_3.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_4.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_5.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_6.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_7.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_8.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_9.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_10.json": DEV_OUTSIDER_TARGET,
    "eval_dev_outsider_11.json": DEV_NEWCOMERS_TARGET,
}


class NoCaseFiles(FileNotFoundError):
    """The case files are not where they were looked for (an installed wheel carries none)."""


def load_cases(
    path: Path | None = None, *, split: Split = "dev", name: str | None = None, folder: Path = EVALS
) -> CaseFile:
    """A case file, validated: ``path``, else ``name`` (by default the development or held-out part) in ``folder``.

    Raises ``NoCaseFiles`` when the file is not there, saying where the case files are."""
    name = name or ("eval_cases.json" if split == "dev" else "eval_heldout.json")
    target = path or folder / name
    if not target.is_file():
        raise NoCaseFiles(
            f"no case file {target}: the case files are in the maya-tools repository's evals/ folder and are "
            "not installed with the package; clone it and pass --cases evals (a folder) or --cases FILE"
        )
    return CaseFile.model_validate_json(target.read_text())
