"""Tests of the room board service (labkit/workshop/board/): no hub, a fake HubAuth and directory."""
