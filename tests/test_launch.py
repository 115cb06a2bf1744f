"""Where ``sessions.launch`` starts a terminal: the folder it checked, never another one."""

from __future__ import annotations

import os

import pytest

from c3async.ground.project import resolve
from c3async.sessions.launch import open_terminal
from stress.transcripts import simple_session

pytestmark = pytest.mark.process  # the terminal (``true`` standing in) is a process


def test_a_terminal_opens_in_the_folder_checked_not_through_the_link_the_transcript_names(claude, monkeypatch):
    # The transcript's cwd is a link into the project: what was checked is where it points now;
    # starting the terminal at the link would follow it again later, wherever it points then.
    claude.activate(monkeypatch)
    monkeypatch.setenv("C3_TERMINAL", "true")
    project = claude.project("app")
    link = claude.root / "via"
    link.symlink_to(project)
    sid = simple_session(claude.folder(project), str(link), "the one to open")
    assert open_terminal(resolve(project), sid) == project == os.path.realpath(link)
