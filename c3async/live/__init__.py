"""Floor 2, a reader: who is live, from facts. Each MCP process writes a heartbeat file; Claude
Code's own registry says which claude runs and whether it waits; the activity log is the last
resort. Modules: ``heartbeat`` (the file and its writer), ``registry_file`` (one file of
Claude Code's registry, read with the standard library alone), ``running`` (the registry, kept
for a reader that polls), ``reader`` (who is live), ``identity`` (which host session and IDE a
server serves), ``hooks`` (Claude Code hook rows), ``waslive`` (which sessions were live,
remembered past a reboot for ``reopen``), ``statusline`` (install-statusline). May
import the ground, the catalog and the stores.

Nothing is imported here: the status line reads the registry alone (``registry_file``), on
every refresh of every window, and pays for no more than it reads."""
