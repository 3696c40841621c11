"""Code shared by the three services (placement, scheduler/conductor, power controller).

placement/, scheduler/, conductor/ and powerpolicy/ never import each other; they
meet only here and over REST (or the message bus). Nothing in this package imports
any of them.
"""
