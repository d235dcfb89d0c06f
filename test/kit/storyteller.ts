/**
 * A real uAgents 0.25 chat agent as its users write one (a mailbox agent with the chat protocol
 * of `uagents_core`), for the tests that talk to one: run it with `runScript` (test/kit/real-client.ts)
 * and the arguments `agentverse port seed story-json`.
 */

/** The streamed reply the agent tells for "story", chunk by chunk. */
export const STORY = ['Once ', 'upon ', 'a time'];

/**
 * The agent: it acknowledges each chat message, then answers it (a story as a streamed reply),
 * and prints what it hears as JSON lines.
 */
export const STORYTELLER_SCRIPT = `
import json, sys
from uuid import uuid4
from uagents import Agent, Context, Protocol
from uagents_core.contrib.protocols.chat import (
    ChatAcknowledgement,
    ChatMessage,
    EndSessionContent,
    EndStreamContent,
    StartSessionContent,
    StartStreamContent,
    TextContent,
    chat_protocol_spec,
)

agentverse, port, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3]
story = json.loads(sys.argv[4])

agent = Agent(name="storyteller", seed=seed, port=port, mailbox=True, agentverse=agentverse)
chat = Protocol(spec=chat_protocol_spec)


def heard(**fields):
    print(json.dumps(fields), flush=True)


@chat.on_message(ChatMessage)
async def on_message(ctx: Context, sender: str, msg: ChatMessage):
    heard(
        message=str(msg.msg_id),
        sender=sender,
        session=str(ctx.session),
        content=[part.type for part in msg.content],
        text=msg.text(),
    )
    await ctx.send(sender, ChatAcknowledgement(acknowledged_msg_id=msg.msg_id))
    if any(isinstance(part, EndSessionContent) for part in msg.content):
        return
    if any(isinstance(part, StartSessionContent) for part in msg.content):
        ctx.logger.info(f"{sender} starts a session")
    text = msg.text()
    if text == "story":
        stream_id = uuid4()
        await ctx.send(sender, ChatMessage(content=[StartStreamContent(stream_id=stream_id)]))
        for chunk in story:
            await ctx.send(sender, ChatMessage(content=[TextContent(text=chunk)]))
        await ctx.send(sender, ChatMessage(content=[EndStreamContent(stream_id=stream_id)]))
    elif text:
        await ctx.send(sender, ChatMessage(content=[TextContent(text=f"You said: {text}")]))


@chat.on_message(ChatAcknowledgement)
async def on_acknowledgement(ctx: Context, sender: str, msg: ChatAcknowledgement):
    heard(acknowledged=str(msg.acknowledged_msg_id), sender=sender, session=str(ctx.session))


agent.include(chat, publish_manifest=True)
heard(address=agent.address)
agent.run()
`;
