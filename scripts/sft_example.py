#!/usr/bin/env python3
"""A small supervised fine-tuning set for docs/data.md's walk-through and its test: questions and
answers about opposites and colours, as JSON lines, half {"prompt", "response"} and half
{"messages"} with a system message. Deterministic; standard library only.

    scripts/sft_example.py OUT.jsonl [LINES]     # LINES: 2000"""
import json
import sys

OPPOSITES = [("hot", "cold"), ("up", "down"), ("big", "small"), ("fast", "slow"),
             ("day", "night"), ("open", "closed"), ("full", "empty"), ("early", "late"),
             ("light", "dark"), ("young", "old"), ("wet", "dry"), ("hard", "soft")]
COLOURS = [("the sky", "blue"), ("grass", "green"), ("snow", "white"), ("coal", "black"),
           ("a lemon", "yellow"), ("a tomato", "red"), ("an orange", "orange"),
           ("a plum", "purple")]


def pairs():
    for a, b in OPPOSITES:
        yield f"What is the opposite of {a}?", f"The opposite of {a} is {b}."
    for thing, colour in COLOURS:
        yield f"What colour is {thing}?", f"{thing[0].upper() + thing[1:]} is {colour}."


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    qa = list(pairs())
    with open(sys.argv[1], "w") as f:
        for i in range(lines):
            # Every question in both forms: alone, and after a system message.
            q, a = qa[(i * 7) % len(qa)]
            if (i // len(qa)) % 2 == 0:
                line = {"prompt": q, "response": a}
            else:
                line = {"messages": [{"role": "system", "content": "Answer in one sentence."},
                                     {"role": "user", "content": q},
                                     {"role": "assistant", "content": a}]}
            f.write(json.dumps(line) + "\n")
    print(f"wrote {sys.argv[1]}: {lines} examples of {len(qa)} questions")


if __name__ == "__main__":
    main()
