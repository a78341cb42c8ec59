"""The key and what goes into it: key.py says what the key covers and assembles it; its inputs beyond
the IR are jitflow's own build code (recipe.py) and TVM's registrations (registrations.py, and the
intrinsic lowering rules: lowering_rules.py), with held_values.py and code_identity.py naming a
registered callable and what it holds by text the same under every Python version; key_diff.py says
which inputs two keys differ in."""
