"""blendsql.ingredients"""
