"""Importers of public cluster traces into gavelsched traces, one module per source."""

from __future__ import annotations

from .philly import ImportResult, import_philly

# Name (as given to ``gavelsched trace import --format``) -> importer.
IMPORTERS = {"philly": import_philly}

__all__ = ["IMPORTERS", "ImportResult", "import_philly"]
