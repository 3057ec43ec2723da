"""How the facts script frames its output: one section per fact, between marker lines. Standard
library only: the controller cuts an SSH host's output with it (fleet.facts), a Slurm node its
own (fleet.host.nodeprep), so both read the same script's output the same way."""

from __future__ import annotations

from dataclasses import dataclass

SECTION_MARK = "@@fleet-facts@@"


@dataclass(frozen=True)
class SectionOutput:
    text: str
    exit_code: int


def split_sections(output: str) -> dict[str, SectionOutput]:
    """The composite script's stdout -> fact name -> (output, exit code). Unfinished sections are left out."""
    sections: dict[str, SectionOutput] = {}
    name: str | None = None
    body: list[str] = []
    for line in output.split("\n"):
        if line.startswith(SECTION_MARK + " "):
            words = line.split()
            if len(words) == 3 and words[1] == "begin":
                name, body = words[2], []
                continue
            if len(words) == 4 and words[1] == "end" and words[2] == name and words[3].lstrip("-").isdigit():
                # the newline printed before the end marker ends the last line of output, or makes
                # an empty last line that restores the output's own final newline: joining is exact
                sections[name] = SectionOutput("\n".join(body), int(words[3]))
                name = None
                continue
        if name is not None:
            body.append(line)
    return sections
