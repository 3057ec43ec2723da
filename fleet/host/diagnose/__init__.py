"""Why did a run fail: the failure-signature catalogue and the classifier behind `fleet diagnose`."""

from fleet.host.diagnose.catalogue import FailureClass
from fleet.host.diagnose.classify import (
    Diagnosis,
    DiagnosisHint,
    Evidence,
    Finding,
    diagnose_file,
    diagnose_paths,
    diagnose_text,
    render_diagnoses,
)

__all__ = [
    "Diagnosis",
    "DiagnosisHint",
    "Evidence",
    "FailureClass",
    "Finding",
    "diagnose_file",
    "diagnose_paths",
    "diagnose_text",
    "render_diagnoses",
]
