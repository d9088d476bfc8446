"""Tasks of the review-loop example: a deterministic stand-in for an LLM writer and critic."""

from __future__ import annotations

from tether import task


@task("writing.draft")
def draft(topic: str, attempt: int, feedback: str = "") -> dict[str, object]:
    """Write draft number ``attempt`` about ``topic``, taking the critic's feedback."""
    text = f"{topic}: draft {attempt}"
    if feedback:
        text += f" (revised: {feedback})"
    return {"text": text, "attempt": attempt}


@task("writing.critique")
def critique(text: str) -> dict[str, object]:
    """Score a draft: each revision scores 3 more, starting at 3."""
    attempt = int(text.split("draft ")[1].split(" ")[0])
    score = 3 * attempt
    feedback = "be more concrete" if score < 8 else "good"
    return {"score": score, "feedback": feedback}


@task("writing.publish")
def publish(text: str, score: int) -> dict[str, object]:
    """Publish the text (here: return where it would live)."""
    slug = text.split(":")[0].lower().replace(" ", "-")
    return {"url": f"https://blog.example.com/{slug}", "score": score}
