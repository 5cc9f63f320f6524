"""Pictures and videos: what the bytes are, where they are stored, media in replies."""
