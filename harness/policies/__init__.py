"""Policy backends: endpoints, local checkpoints and scripted policies."""
