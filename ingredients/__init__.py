"""Gallery of extra ingredients written only on blendsql's public API.

Each module is a copyable starting point with its own tests next to it
(``test_<module>.py``). Nothing here is installed with the package; copy the
file you need into your project and register the class:
``BlendSQL(db, ingredients=[StartsWith, DateRange])``.
"""
