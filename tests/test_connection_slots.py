"""The connections a pull's downloads share (`connection_slots`): never more held than there
are, an earlier file's waiter served first, a cancelled waiter never keeps a slot."""

from __future__ import annotations

import asyncio

import pytest

from cantor_desktop.fetch.connection_slots import ConnectionSlots


def run(coro):
    return asyncio.run(coro)


def test_no_more_are_held_than_there_are_and_each_is_given_back():
    async def go():
        slots = ConnectionSlots(3)
        most = 0

        async def request(k: int) -> None:
            nonlocal most
            async with slots.turn(k % 4).hold():
                most = max(most, slots.held)
                await asyncio.sleep(0.001 * (k % 3))

        await asyncio.gather(*(request(k) for k in range(40)))
        return most, slots.free

    most, free = run(go())
    assert most == 3 and free == 3


def test_a_waiter_of_an_earlier_file_goes_first_then_arrival_order():
    async def go():
        slots = ConnectionSlots(1)
        order: list[str] = []
        await slots.acquire(0)  # the one slot, held

        async def wait(name: str, rank: int) -> None:
            async with slots.turn(rank).hold():
                order.append(name)

        tasks = []
        for name, rank in (("c1", 2), ("b1", 1), ("c2", 2), ("a1", 0), ("b2", 1)):
            tasks.append(asyncio.create_task(wait(name, rank)))
            await asyncio.sleep(0)  # queued in this order
        slots.release()
        await asyncio.gather(*tasks)
        return order

    assert run(go()) == ["a1", "b1", "b2", "c1", "c2"]


def test_a_cancelled_waiter_gives_up_its_place_and_never_keeps_a_slot():
    async def go():
        slots = ConnectionSlots(1)
        await slots.acquire(0)
        gone = asyncio.create_task(slots.acquire(0))
        later = asyncio.create_task(slots.acquire(1))
        await asyncio.sleep(0)
        gone.cancel()
        slots.release()  # skips the cancelled waiter
        await later
        assert gone.cancelled() and slots.held == 1
        # a waiter handed the slot in the same step as it is cancelled passes it on
        handed = asyncio.create_task(slots.acquire(0))
        after = asyncio.create_task(slots.acquire(1))
        await asyncio.sleep(0)
        slots.release()  # hands the slot to `handed`...
        handed.cancel()  # ...which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await handed
        await after
        assert slots.held == 1
        slots.release()
        return slots.free

    assert run(go()) == 1


def test_giving_back_a_slot_never_taken_is_an_error():
    slots = ConnectionSlots(2)
    with pytest.raises(RuntimeError, match="released more"):
        slots.release()
    with pytest.raises(ValueError, match="not a positive number"):
        ConnectionSlots(0)
