"""The reference: what a pattern means, computed the slow, obvious way. ``oracle`` follows
the papers' definitions by brute force (all matches, Definition 2; SES's earliest-maximal
matches), ``matches`` is the ``Match`` it returns, ``summary`` the match-window counters of
Def. 5 written plainly. It imports only the language: never the engine or its kernels, so
each can check the other.
"""
