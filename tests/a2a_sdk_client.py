"""A2A 1.0 session with the official Python `a2a-sdk` (1.x) against a real `serve`
(driven by tests/a2a_endpoint.rs): fetch the agent card with the card resolver, create
the client the SDK's factory picks from the card (JSON-RPC, A2A-Version 1.0), send one
message, then read the task with GetTask until the recipient (a fake agent in a terminal)
has replied through the tool API. A message from an agent that may not send is refused.

    python3 a2a_sdk_client.py BASE_URL TOKEN FORBIDDEN_BASE_URL

Prints what it saw, then `RESULT {json}`; exits non-zero on any failed check.
"""
import asyncio
import json
import sys
import time

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.types.a2a_pb2 import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import json_format


def check(condition, message):
    if not condition:
        print(f"FAILED: {message}", flush=True)
        sys.exit(1)


async def main(base, token, forbidden):
    # A 1.x client sends A2A-Version: 1.0 (the SDK's factory adds it to a client it is
    # given; the card is fetched before, so it is set here too).
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        # The 1.0 card parses strictly (no field unknown to 1.0's AgentCard).
        raw = (await http.get(f"{base}/.well-known/agent-card.json")).json()
        json_format.ParseDict(raw, AgentCard())
        card = await A2ACardResolver(http, base).get_agent_card()
        interface = card.supported_interfaces[0]
        print(f"card: {card.name!r} {interface.protocol_binding} {interface.protocol_version} {interface.url}", flush=True)
        check(interface.url == base, f"the card's URL {interface.url} is not {base}")
        check(interface.protocol_version == "1.0", "protocolVersion 1.0")
        check(not card.capabilities.streaming and not card.capabilities.push_notifications, "no streaming, no push")
        check("termsprawlSession" in card.security_schemes, "a bearer security scheme")

        try:
            await A2ACardResolver(http, forbidden).get_agent_card()
            check(False, "a card of an agent we may not send to was given")
        except AgentCardResolutionError as e:
            print(f"forbidden card: {e.status_code}", flush=True)
            check(e.status_code == 404, f"status {e.status_code}")

        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        message = Message(
            message_id="sdk:message/1.0",  # any string: kept by its hex
            role=Role.ROLE_USER,
            parts=[Part(text="please reply: sent by the A2A SDK")],
        )
        events = [event async for event in client.send_message(SendMessageRequest(message=message))]
        check(len(events) == 1 and events[0].HasField("task"), f"one task back: {events}")
        task = events[0].task
        print(f"sent: task {task.id} {TaskState.Name(task.status.state)}", flush=True)
        check(task.status.state == TaskState.TASK_STATE_SUBMITTED, "submitted")
        check(task.history[0].parts[0].text == "please reply: sent by the A2A SDK", "the message in history")
        check(task.history[0].message_id == "sdk:message/1.0", f"its messageId: {task.history[0].message_id}")

        # The same messageId again: the same task (idempotent).
        again = [event async for event in client.send_message(SendMessageRequest(message=message))]
        check(again[0].task.id == task.id, "the same messageId gives the same task")

        deadline = time.monotonic() + 20
        while True:
            seen = await client.get_task(GetTaskRequest(id=task.id))
            if seen.status.state != TaskState.TASK_STATE_SUBMITTED or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        reply = seen.artifacts[0].parts[0].text if seen.artifacts else None
        print(f"read: task {seen.id} {TaskState.Name(seen.status.state)} reply {reply!r}", flush=True)
        check(seen.status.state == TaskState.TASK_STATE_COMPLETED, "completed after the reply")

        try:
            await client.get_task(GetTaskRequest(id="task-0000"))
            check(False, "an unknown task was read")
        except Exception as e:  # the SDK raises A2A's error for the JSON-RPC code
            print(f"unknown task: {type(e).__name__}: {e}", flush=True)
            check(type(e).__name__ == "TaskNotFoundError", f"TaskNotFoundError, not {type(e).__name__}")

        await client.close()
        result = {"taskId": task.id, "state": TaskState.Name(seen.status.state), "reply": reply}
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
