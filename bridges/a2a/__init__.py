"""The A2A plug-in: any agent that speaks the Agent2Agent protocol (1.0 or 0.3) in Yui."""
