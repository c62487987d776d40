"""The API's routes by topic: state (live, from the agent), history (the store), events (hooks)."""
