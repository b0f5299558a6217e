"""`fleetmem serve`'s start-up text tells the user where the server is and how to get a token."""

from __future__ import annotations

from pathlib import Path

from fleetmem.config import ServeSettings, Settings
from fleetmem.transport.http_local import banner


def test_the_banner_names_the_mcp_url_and_the_token_command(tmp_path: Path) -> None:
    text = banner(Settings(data_dir=tmp_path, serve=ServeSettings(port=8765)), "http://127.0.0.1:8765")
    assert "http://127.0.0.1:8765/mcp" in text
    assert "fleetmem token create --client NAME --scopes read,write" in text
    assert str(tmp_path) in text
