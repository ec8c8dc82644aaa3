"""Synthetic airline customer-service runs in the canonical format, for demos and benchmarks.

Each task is one customer request (cancel a reservation, add checked bags, move a flight) run
four times: twice by a teacher model, twice by a student. The runs look like tau-bench airline
traces: a policy system prompt, tool schemas, tool calls with JSON results, some tool errors
(recovered or ignored), successes and failures. Most failures carry a gold label pointing at the
assistant step that made the decisive mistake.

Record `i` depends only on `seed` and `i`, so the first 60 records of `demo_records(80)` are
those of `demo_records(60)`, and importing them again creates nothing.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

PROJECT_NAME = "Demo: airline support agents"
AGENTS = (("gpt-4o", "teacher"), ("qwen2.5-7b-instruct", "student"))
TRIALS = 2
RUNS_PER_TASK = len(AGENTS) * TRIALS
SUCCESS_RATE = {"teacher": 0.75, "student": 0.4}
# The longest run before padding has 23 steps; shorter lengths cannot be asked for.
MIN_STEPS = 23

SYSTEM_PROMPT = """# Airline Agent Policy

The current time is 2024-05-15 15:00:00 EST. As an airline agent you can help users book, modify \
or cancel flight reservations.

- Before any action that updates the booking database (cancelling, changing flights, editing \
baggage), list the action details and obtain explicit user confirmation (yes) to proceed.
- Do not provide information that the user or the tools did not give you.
- Make one tool call at a time, and do not respond to the user while making a tool call.
- Transfer the user to a human agent only if the request cannot be handled with your tools.

Checked bags: regular members get 0/1/2 free bags per passenger in basic economy/economy/\
business, silver members 1/2/3, gold members 2/3/3. Each extra bag costs 50 dollars."""


def _function(name: str, description: str, **properties: dict) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


_STRING = {"type": "string"}
TOOLS = [
    _function("get_user_details", "Get the profile of a user.", user_id=_STRING),
    _function("get_reservation_details", "Get a reservation.", reservation_id=_STRING),
    _function(
        "search_direct_flight",
        "Search direct flights between two airports on a date (YYYY-MM-DD).",
        origin=_STRING,
        destination=_STRING,
        date=_STRING,
    ),
    _function("cancel_reservation", "Cancel a whole reservation.", reservation_id=_STRING),
    _function(
        "update_reservation_baggages",
        "Update the checked bags of a reservation.",
        reservation_id=_STRING,
        total_baggages={"type": "integer"},
        nonfree_baggages={"type": "integer"},
        payment_id=_STRING,
    ),
    _function(
        "update_reservation_flights",
        "Change the flights of a reservation.",
        reservation_id=_STRING,
        cabin={"type": "string", "enum": ["basic_economy", "economy", "business"]},
        flights={
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"flight_number": _STRING, "date": _STRING},
            },
        },
        payment_id=_STRING,
    ),
    _function(
        "get_flight_status", "Get the status of a flight on a date.", flight=_STRING, date=_STRING
    ),
    _function("think", "Think about something; changes nothing.", thought=_STRING),
    _function(
        "transfer_to_human_agents",
        "Transfer the user to a human agent with a summary of the issue.",
        summary=_STRING,
    ),
]

FIRST_NAMES = ("Mia", "Omar", "Ivan", "Sofia", "Liam", "Aarav", "Chen", "Fatima", "Noah", "Yara")
LAST_NAMES = ("Li", "Rossi", "Garcia", "Kim", "Patel", "Nguyen", "Silva", "Ahmed", "Lopez", "Sato")
AIRPORTS = {
    "JFK": "New York",
    "SEA": "Seattle",
    "SFO": "San Francisco",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "ATL": "Atlanta",
    "BOS": "Boston",
    "MIA": "Miami",
    "DEN": "Denver",
}
CABINS = ("basic_economy", "economy", "business")
FREE_BAGS = {"regular": (0, 1, 2), "silver": (1, 2, 3), "gold": (2, 3, 3)}
KINDS = ("cancel", "baggage", "change_flight")
FAILURES = ("wrong_arguments", "skipped_confirmation", "ignored_tool_error", "premature_answer")
FAILURE_WEIGHTS = (3, 2.5, 3, 1.5)
# The default taxonomy's name for each labelled kind of failure (curation.taxonomy).
CATEGORIES = {
    "wrong_arguments": "wrong_arguments",
    "skipped_confirmation": "unconfirmed_side_effect",
    "ignored_tool_error": "ignored_tool_output_or_error",
}
NOT_FOUND = json.dumps({"error": "reservation not found"})
BAD_PAYMENT = json.dumps({"error": "payment method not found"})
_ID_CHARS = string.ascii_uppercase + string.digits
_CALL_CHARS = string.ascii_letters + string.digits


@dataclass
class Reservation:
    id: str
    origin: str
    destination: str
    date: str
    flight: str
    cabin: str
    price: int
    passengers: int
    bags: int
    insurance: bool

    @property
    def route(self) -> str:
        origin, destination = self.origin, self.destination
        return f"{AIRPORTS[origin]} ({origin}) to {AIRPORTS[destination]} ({destination})"

    def as_json(self, user_id: str, **changes: Any) -> str:
        data = {
            "reservation_id": self.id,
            "user_id": user_id,
            "origin": self.origin,
            "destination": self.destination,
            "flight_type": "one_way",
            "cabin": self.cabin,
            "flights": [{"flight_number": self.flight, "date": self.date, "price": self.price}],
            "passengers": self.passengers,
            "total_baggages": self.bags,
            "insurance": "yes" if self.insurance else "no",
            "status": "confirmed",
        }
        data.update(changes)
        return json.dumps(data)


@dataclass
class Customer:
    user_id: str
    first: str
    last: str
    tier: str
    card: str
    card_last_four: str
    gift_card: str
    reservations: list[Reservation]

    def as_json(self) -> str:
        return json.dumps(
            {
                "name": {"first_name": self.first, "last_name": self.last},
                "email": f"{self.first}.{self.last}{self.user_id[-4:]}@example.com".lower(),
                "membership": self.tier,
                "payment_methods": {
                    self.card: {"source": "credit_card", "last_four": self.card_last_four},
                    self.gift_card: {"source": "gift_card", "amount": 120},
                },
                "reservations": [r.id for r in self.reservations],
            }
        )


@dataclass
class Task:
    id: str
    kind: str
    customer: Customer
    target: Reservation
    new_date: str = ""
    options: list[tuple[str, str, int]] = field(default_factory=list)  # flight, departs, price
    choice: int = 0
    extra_bags: int = 0

    @property
    def total_bags(self) -> int:
        return self.target.bags + self.extra_bags

    @property
    def free_bags(self) -> int:
        per_passenger = FREE_BAGS[self.customer.tier][CABINS.index(self.target.cabin)]
        return per_passenger * self.target.passengers

    @property
    def nonfree_bags(self) -> int:
        return max(0, self.total_bags - self.free_bags)

    def expected_action(self) -> dict:
        target, card = self.target.id, self.customer.card
        if self.kind == "cancel":
            return {"name": "cancel_reservation", "kwargs": {"reservation_id": target}}
        if self.kind == "baggage":
            kwargs = {
                "reservation_id": target,
                "total_baggages": self.total_bags,
                "nonfree_baggages": self.nonfree_bags,
                "payment_id": card,
            }
            return {"name": "update_reservation_baggages", "kwargs": kwargs}
        flight = self.options[self.choice][0]
        kwargs = {
            "reservation_id": target,
            "cabin": self.target.cabin,
            "flights": [{"flight_number": flight, "date": self.new_date}],
            "payment_id": card,
        }
        return {"name": "update_reservation_flights", "kwargs": kwargs}

    def instruction(self) -> str:
        c, r = self.customer, self.target
        trip = f"{AIRPORTS[r.origin]} to {AIRPORTS[r.destination]}"
        if self.kind == "cancel":
            wish = f"cancel your {r.date} flight from {trip}"
        elif self.kind == "baggage":
            wish = f"add {self.extra_bags} checked bag(s) to your {r.date} flight from {trip}"
        else:
            departs = self.options[self.choice][1]
            wish = (
                f"move your {trip} flight from {r.date} to the {departs} flight on {self.new_date}"
            )
        return (
            f"You are {c.user_id}. You want to {wish}, paying any cost with your card. Your "
            f"reservation ID is {r.id}, but you only give it if asked. You are reactive and do "
            "not volunteer information."
        )


def _date(rng: random.Random) -> str:
    return f"2024-05-{rng.randint(16, 30):02d}"


def _reservation(rng: random.Random) -> Reservation:
    origin, destination = rng.sample(sorted(AIRPORTS), 2)
    return Reservation(
        id="".join(rng.choices(_ID_CHARS, k=6)),
        origin=origin,
        destination=destination,
        date=_date(rng),
        flight=f"HAT{rng.randint(1, 299):03d}",
        cabin=rng.choice(CABINS),
        price=rng.randrange(90, 900, 5),
        passengers=rng.randint(1, 3),
        bags=rng.randint(0, 2),
        insurance=rng.random() < 0.5,
    )


def _make_task(seed: int, number: int) -> Task:
    rng = random.Random(f"demo:{seed}:task:{number}")
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    reservations = [_reservation(rng) for _ in range(rng.randint(2, 3))]
    customer = Customer(
        user_id=f"{first}_{last}_{rng.randint(1000, 9999)}".lower(),
        first=first,
        last=last,
        tier=rng.choice(tuple(FREE_BAGS)),
        card=f"credit_card_{rng.randint(1_000_000, 9_999_999)}",
        card_last_four=f"{rng.randint(0, 9999):04d}",
        gift_card=f"gift_card_{rng.randint(1_000_000, 9_999_999)}",
        reservations=reservations,
    )
    task = Task(
        id=f"airline-{seed}-{number:04d}",
        kind=rng.choice(KINDS),
        customer=customer,
        target=rng.choice(reservations),
    )
    if task.kind == "baggage":
        task.extra_bags = rng.randint(1, 3)
    elif task.kind == "change_flight":
        task.new_date = _date(rng)
        hours = sorted(rng.sample(range(6, 22), 3))
        task.options = [
            (
                f"HAT{rng.randint(1, 299):03d}",
                f"{h:02d}:{rng.choice(('00', '30'))}",
                rng.randrange(90, 900, 5),
            )
            for h in hours
        ]
        task.choice = rng.randrange(len(hours))
    return task


def _typo(rng: random.Random, reservation_id: str) -> str:
    """The ID with one character changed, as a user or a model misreads it."""
    i = rng.randrange(len(reservation_id))
    other = rng.choice(_ID_CHARS.replace(reservation_id[i], ""))
    return reservation_id[:i] + other + reservation_id[i + 1 :]


class _Conversation:
    """Steps under construction; `slot` marks where padding goes once the length is known."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.steps: list[dict] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.slot = 0

    def user(self, content: str) -> None:
        self.steps.append({"role": "user", "content": content})

    def agent(self, content: str) -> dict:
        step = {"role": "assistant", "content": content}
        self.steps.append(step)
        return step

    def call(self, name: str, arguments: dict, result: str, reasoning: str = "") -> dict:
        call_id = "call_" + "".join(self.rng.choices(_CALL_CHARS, k=24))
        step: dict[str, Any] = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}],
        }
        if reasoning:
            step["reasoning"] = reasoning
        self.steps.append(step)
        self.steps.append(
            {"role": "tool", "tool_call_id": call_id, "name": name, "content": result}
        )
        return step

    def pad(self, pairs: int, task: Task) -> None:
        """Insert `pairs` harmless call/result pairs (thoughts, status checks) at the slot."""
        saved, self.steps = self.steps, []
        r = task.target
        for i in range(pairs):
            if i % 2:
                status = self.rng.choice(("available", "on time", "delayed"))
                result = json.dumps({"flight": r.flight, "date": r.date, "status": status})
                self.call("get_flight_status", {"flight": r.flight, "date": r.date}, result)
            else:
                thought = self.rng.choice(
                    (
                        f"Reservation {r.id} is {r.route} on {r.date} in {r.cabin}.",
                        f"The user is a {task.customer.tier} member; check the policy first.",
                        f"Check flight {r.flight} before changing anything.",
                    )
                )
                self.call("think", {"thought": thought}, "")
        saved[self.slot : self.slot] = self.steps
        self.steps = saved


@dataclass
class _Plan:
    role: str
    success: bool
    failure: str  # one of FAILURES when not success
    labelled: bool
    user_gives_id: str  # "right", "wrong" (a misremembered ID: a recovered tool error) or "no"


def _plan(rng: random.Random, role: str) -> _Plan:
    success = rng.random() < SUCCESS_RATE[role]
    failure = "" if success else rng.choices(FAILURES, FAILURE_WEIGHTS)[0]
    return _Plan(
        role=role,
        success=success,
        failure=failure,
        labelled=failure not in ("", "premature_answer") and rng.random() < 0.8,
        user_gives_id=rng.choices(("right", "wrong", "no"), (2, 1, 2))[0],
    )


_OPENERS = {
    "cancel": "Hi, I need to cancel one of my flights.",
    "baggage": "Hello! I'd like to add some checked bags to an upcoming trip.",
    "change_flight": "Hi there, I need to move my flight to a different day.",
}


def _look_up(conv: _Conversation, task: Task, plan: _Plan) -> None:
    """Greeting, the user's ID, the profile, and the reservation lookups up to the target."""
    c, target = task.customer, task.target
    conv.user(_OPENERS[task.kind])
    conv.agent("I can help with that. Could you please give me your user ID?")
    guess = _typo(conv.rng, target.id) if plan.user_gives_id == "wrong" else ""
    reply = {
        "right": f"The reservation ID is {target.id}.",
        "wrong": f"I think the reservation ID is {guess}.",
        "no": "I don't have the reservation ID at hand.",
    }[plan.user_gives_id]
    conv.user(f"Sure, my user ID is {c.user_id}. {reply}")
    conv.call("get_user_details", {"user_id": c.user_id}, c.as_json())
    if guess:
        conv.call("get_reservation_details", {"reservation_id": guess}, NOT_FOUND)
    if plan.user_gives_id == "right":
        lookups = [target]
    else:  # look through the profile's reservations until the one the user means
        lookups = c.reservations[: c.reservations.index(target) + 1]
    for r in lookups:
        conv.call("get_reservation_details", {"reservation_id": r.id}, r.as_json(c.user_id))
    conv.slot = len(conv.steps)


def _confirm(conv: _Conversation, plan: _Plan, question: str, answer: str) -> None:
    if plan.failure != "skipped_confirmation":
        conv.agent(question + " Shall I proceed? (yes/no)")
        conv.user(answer)


def _act(
    conv: _Conversation, task: Task, plan: _Plan, right: dict, wrong: dict, result: str
) -> dict:
    """The database action, with the right arguments or with the plan's wrong ones."""
    name = task.expected_action()["name"]
    reasoning = (
        f"Calling {name} for reservation {task.target.id}." if plan.role == "teacher" else ""
    )
    arguments = wrong if plan.failure in ("wrong_arguments", "ignored_tool_error") else right
    return conv.call(name, arguments, result, reasoning)


def _cancel(conv: _Conversation, task: Task, plan: _Plan) -> tuple[dict, dict, str]:
    c, r = task.customer, task.target
    refund = r.price * r.passengers
    _confirm(
        conv,
        plan,
        f"I found reservation {r.id}: {r.route} on {r.date}, {r.cabin}, {r.passengers} "
        f"passenger(s). Cancelling it refunds ${refund} to the original payment method.",
        "Yes, please cancel it.",
    )
    right = {"reservation_id": r.id}
    if plan.failure == "ignored_tool_error":
        wrong, result = {"reservation_id": _typo(conv.rng, r.id)}, NOT_FOUND
    else:
        other = next(o for o in c.reservations if o is not r)
        wrong = {"reservation_id": other.id}
        cancelled = other if plan.failure == "wrong_arguments" else r
        result = cancelled.as_json(c.user_id, status="cancelled")
    action = _act(conv, task, plan, right, wrong, result)
    done = conv.agent(
        f"Your reservation {r.id} is cancelled. ${refund} will go back to the original payment "
        "method within 5 to 7 business days."
    )
    return action, done, _mismatch("cancel_reservation", right, wrong)


def _baggage(conv: _Conversation, task: Task, plan: _Plan) -> tuple[dict, dict, str]:
    c, r = task.customer, task.target
    cost = 50 * (task.nonfree_bags - max(0, r.bags - task.free_bags))
    charge = f"${cost} to your card ending in {c.card_last_four}" if cost else "nothing"
    _confirm(
        conv,
        plan,
        f"Reservation {r.id} has {r.bags} checked bag(s). As a {c.tier} member in {r.cabin}, "
        f"with {task.extra_bags} more the total is {task.total_bags}, {task.nonfree_bags} of "
        f"them paid. That charges {charge}.",
        "Yes, go ahead.",
    )
    right = task.expected_action()["kwargs"]
    wrong = dict(right)
    if plan.failure == "ignored_tool_error":
        wrong["payment_id"] = f"credit_card_{conv.rng.randint(1_000_000, 9_999_999)}"
        result = BAD_PAYMENT
    else:
        wrong["total_baggages"] += 1
        bags = wrong["total_baggages"] if plan.failure == "wrong_arguments" else task.total_bags
        result = r.as_json(c.user_id, total_baggages=bags)
    action = _act(conv, task, plan, right, wrong, result)
    done = conv.agent(
        f"Done: reservation {r.id} now has {task.total_bags} checked bags; I charged {charge}."
    )
    return action, done, _mismatch("update_reservation_baggages", right, wrong)


def _change_flight(conv: _Conversation, task: Task, plan: _Plan) -> tuple[dict, dict, str]:
    c, r = task.customer, task.target
    search = {"origin": r.origin, "destination": r.destination, "date": task.new_date}
    found = [
        {"flight_number": f, "departure": d, "prices": {r.cabin: p}, "status": "available"}
        for f, d, p in task.options
    ]
    conv.call("search_direct_flight", search, json.dumps(found))
    listing = "\n".join(
        f"{i}. {f} departing {d}, ${p} in {r.cabin}" for i, (f, d, p) in enumerate(task.options, 1)
    )
    conv.agent(f"These direct flights fly {r.route} on {task.new_date}:\n{listing}\nWhich one?")
    flight, departs, price = task.options[task.choice]
    conv.user(f"The {departs} one, please. Charge any difference to my card.")
    difference = (price - r.price) * r.passengers
    _confirm(
        conv,
        plan,
        f"To confirm: reservation {r.id} moves to {flight} on {task.new_date} in {r.cabin}; "
        f"the fare difference of ${difference} goes to your card ending in {c.card_last_four}.",
        "Yes.",
    )
    right = task.expected_action()["kwargs"]
    wrong = dict(right)
    if plan.failure == "ignored_tool_error":
        wrong["reservation_id"] = _typo(conv.rng, r.id)
        result = NOT_FOUND
    else:
        other = task.options[(task.choice + 1) % len(task.options)][0]
        wrong["flights"] = [{"flight_number": other, "date": task.new_date}]
        booked = wrong if plan.failure == "wrong_arguments" else right
        result = r.as_json(c.user_id, date=task.new_date, flights=booked["flights"])
    action = _act(conv, task, plan, right, wrong, result)
    done = conv.agent(f"All set: reservation {r.id} is now on {flight} on {task.new_date}.")
    return action, done, _mismatch("update_reservation_flights", right, wrong)


_ACTIONS = {"cancel": _cancel, "baggage": _baggage, "change_flight": _change_flight}


def _mismatch(name: str, right: dict, wrong: dict) -> str:
    changed = [
        f"{key}={json.dumps(wrong[key])} where the user agreed to {json.dumps(right[key])}"
        for key in right
        if wrong[key] != right[key]
    ]
    return f"{name} got {', '.join(changed)}"


def _position(steps: list[dict], step: dict) -> int:
    return next(i for i, s in enumerate(steps) if s is step)


def _labels(task: Task, plan: _Plan, steps: list[dict], action: dict, done: dict, why: str) -> dict:
    act, claim = _position(steps, action), _position(steps, done)
    first, root = act, act
    if plan.failure == "wrong_arguments":
        rationale = f"Step {act}: {why}; the wrong change reached the database."
    elif plan.failure == "skipped_confirmation":
        rationale = (
            f"Step {act} changes reservation {task.target.id} without listing the details and "
            "getting an explicit yes, which the policy requires."
        )
    else:
        first = claim
        rationale = (
            f"The call at step {act} failed with an error, yet step {claim} tells the user the "
            "change was made; nothing changed."
        )
    return {
        "verdict": "failure",
        "first_critical_step": first,
        "root_cause_step": root,
        "category": CATEGORIES[plan.failure],
        "rationale": rationale,
        "annotator": "gold",
    }


def _transfer(conv: _Conversation, task: Task) -> None:
    summary = f"User {task.customer.user_id} asks for help with reservation {task.target.id}."
    conv.call("transfer_to_human_agents", {"summary": summary}, "Transfer successful")


def _record(seed: int, index: int, steps_range: tuple[int, int] | None) -> dict:
    task = _make_task(seed, index // RUNS_PER_TASK)
    model, role = AGENTS[index % RUNS_PER_TASK // TRIALS]
    trial = index % TRIALS
    rng = random.Random(f"demo:{seed}:run:{index}")
    plan = _plan(rng, role)
    conv = _Conversation(rng)
    _look_up(conv, task, plan)
    labels = None
    if plan.failure == "premature_answer":
        _transfer(conv, task)
        closing = {"role": "assistant", "content": "A human agent will be with you shortly."}
    else:
        action, done, why = _ACTIONS[task.kind](conv, task, plan)
        if plan.labelled:
            labels = (action, done, why)
        text = "Thanks, that's all I needed. ###STOP###"
        closing = {"role": "user", "content": text}

    if steps_range is None:
        pairs, close = rng.randint(0, 4), rng.random() < 0.7
    else:
        missing = rng.randint(*steps_range) - len(conv.steps)
        pairs, close = missing // 2, missing % 2 == 1
    conv.pad(pairs, task)
    if close:
        conv.steps.append(closing)

    record: dict[str, Any] = {
        "id": f"{task.id}/{model}/trial-{trial}",
        "task": {
            "id": task.id,
            "instruction": task.instruction(),
            "reference": {"actions": [task.expected_action()]},
            "metadata": {"domain": "airline", "kind": task.kind},
        },
        "agent": {"model": model, "role": role},
        "tools": TOOLS,
        "steps": conv.steps,
        "outcome": {
            "success": plan.success,
            "reward": 1.0 if plan.success else 0.0,
            "info": {"r_actions": 1.0 if plan.success else 0.0},
        },
        "metadata": {"generator": "curation.demo", "seed": seed, "trial": trial},
    }
    if labels:
        record["labels"] = _labels(task, plan, conv.steps, *labels)
    return record


def demo_records(count: int, seed: int = 0, steps: tuple[int, int] | None = None) -> Iterator[dict]:
    """`count` canonical records; `steps=(low, high)` bounds every run's length."""
    if steps is not None and not MIN_STEPS <= steps[0] <= steps[1]:
        raise ValueError(f"steps must be (low, high) with {MIN_STEPS} <= low <= high, got {steps}")
    for index in range(count):
        yield _record(seed, index, steps)
