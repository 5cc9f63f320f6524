"""The webhook plug-in: any agent that answers an HTTP POST, its Controls, the example agent."""
