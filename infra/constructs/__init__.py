"""One construct per capability; each takes the pieces it wires and owns nothing else."""
