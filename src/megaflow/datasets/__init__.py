"""Task sets: SWE-bench-style instances, their repositories, and grading."""
