"""The SSH launcher: tasks on remote hosts over asyncssh, and what only it uses (connections, host keys,
deployment of the trainer and uploads, remote helper commands, the host link and its lease)."""
