"""blendsql.grammar"""
