"""The modeling layer, on the ground floor: the array model (`model`: variables and linear
expressions in whole blocks, assembled once into sparse arrays), its MPS/LP export
(`export`) and the generic scheduling builders (`scheduling`). Solvers and formulations
both stand on it; it imports nothing of distplan above it."""
