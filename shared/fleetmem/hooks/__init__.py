"""Ambient recall in agent harnesses: Claude Code hooks, heartbeats, and their small state files."""
