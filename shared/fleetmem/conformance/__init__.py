"""Protocol conformance over real HTTP with the official `mcp` client.

`run(target_url, token)` executes the data-driven cases in `fleetmem/data/conformance_cases.json`
against a live endpoint, in both protocol eras (the handshake era, `legacy`, and the stateless
2026-07-28 era negotiated by `auto`), and returns a report
`{passed, failed, skipped, marker, cases: [{id, era, status, detail}]}`.

The runner WRITES: it seeds `people/conformance-<marker>` (when the target exposes put_page) and
remembers/forgets facts whose provenance names the marker. They are left in place, marker-named
for easy cleanup; the runner says so before it starts.
"""

from fleetmem.conformance.runner import load_cases, other_surface_cases, run

__all__ = ["load_cases", "other_surface_cases", "run"]
