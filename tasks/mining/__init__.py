"""Making SWE tasks from real repositories: merged pull requests (`mine`) and a repository's
history (`history`). Synthesized tasks are `tasks.synth`'s."""
