"""What a host does against a relay, a room per concern.

client/    the relay client (the one owner of the wire contract) and the host's session
engine/    one engine for every agent: its decisions (plan), its threads (bridge), the
           plug-in contract, delivery, replies, mentions
webhook/   the webhook plug-in: any agent that answers an HTTP POST
model/     the model plug-in: any OpenAI-compatible chat-completions server
controls/  Controls: what an agent is made of, read and changed from the app
media/     pictures and videos, both ways
retry.py   the one backoff and retry loop
send.py    hand-overs: `yui send` and `yui media`
"""
