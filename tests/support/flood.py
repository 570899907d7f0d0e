"""A program on the machine that floods a node with tokenless connections, each sending a
tokenless ``GET /v1/health`` every few seconds (1,030 of them, every 8 s, would keep every
owner's request at 503 on a node that gave strangers the owner's capacity). Standard
library only: it is run as its own process, as another account
where the test can (``python -c "$(this file)" PORT SLOTS SECONDS``).

Each of SLOTS connections sends a health request's head without its last line, holds it 4
to 8 s (the attacker's poll, spread so the slots do not move in step), then ends it and
reads the answer; when the node closes the
connection (after the answer, at the head deadline, or to make room) the slot connects
again at once. It prints one JSON line at the end: connections made, answers by status,
drops, failed connects, and how many connections were open at each half second.
"""

import asyncio
import json
import random
import resource
import sys
import time

POLL_S = 8.0


async def main(port: int, slots: int, seconds: float) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = slots + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(
            resource.RLIMIT_NOFILE,
            (want if hard == resource.RLIM_INFINITY else min(want, hard), hard),
        )
    head = f"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: flood\r\n".encode()
    stats = {"connects": 0, "answers": {}, "dropped": 0, "connect_failed": 0}
    state = {"open": 0}
    end = time.monotonic() + seconds

    async def one_slot(i: int) -> None:
        pace = random.Random(i)
        await asyncio.sleep(i * 2.0 / slots)  # ramp up over 2 s (the listen backlog)
        while time.monotonic() < end:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                stats["connect_failed"] += 1
                await asyncio.sleep(0.05)
                continue
            stats["connects"] += 1
            state["open"] += 1
            try:
                while time.monotonic() < end:
                    writer.write(head)
                    await writer.drain()
                    try:  # hold the head; a byte (or EOF) from the node means it dropped us
                        hold = pace.uniform(POLL_S / 2, POLL_S)
                        got = await asyncio.wait_for(
                            reader.read(1), max(0.01, min(hold, end - time.monotonic()))
                        )
                        stats["dropped"] += 1 if got == b"" else 0
                        break
                    except TimeoutError:
                        pass
                    writer.write(b"\r\n")
                    await writer.drain()
                    status_line = await reader.readline()
                    if not status_line:
                        stats["dropped"] += 1
                        break
                    status = status_line.split(b" ", 2)[1].decode()
                    stats["answers"][status] = stats["answers"].get(status, 0) + 1
                    length, close = 0, False
                    while (line := await reader.readline()) not in (b"\r\n", b""):
                        name, _, value = line.decode("latin-1").partition(":")
                        if name.strip().lower() == "content-length":
                            length = int(value.strip())
                        if name.strip().lower() == "connection" and "close" in value.lower():
                            close = True
                    await reader.readexactly(length)
                    if close:
                        break
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                stats["dropped"] += 1
            finally:
                state["open"] -= 1
                writer.close()

    samples: list[int] = []

    async def sample() -> None:
        while time.monotonic() < end:
            samples.append(state["open"])
            await asyncio.sleep(0.5)

    await asyncio.gather(sample(), *(one_slot(i) for i in range(slots)))
    stats["open_samples"] = samples
    return stats


if __name__ == "__main__":
    port, slots, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    print(json.dumps(asyncio.run(main(port, slots, seconds))), flush=True)
