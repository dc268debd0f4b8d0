"""mypy plugin: a column of a SQLModel table read on the class is a SQLAlchemy column, not a value.

SQLModel declares `Label.met: bool`, which is what an instance holds; on the class itself SQLAlchemy
puts an instrumented attribute there (`Label.met == True` builds SQL). Without this plugin mypy
types every query expression as a plain bool or int and reports hundreds of false errors.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import MypyFile, NameExpr, TypeInfo, Var
from mypy.plugin import AttributeContext, Plugin
from mypy.types import Instance, Type

SQLMODEL_BASE = "sqlmodel.main.SQLModel"
INSTRUMENTED = "sqlalchemy.orm.attributes.InstrumentedAttribute"


def _is_table_model(info: TypeInfo) -> bool:
    if not any(base.fullname == SQLMODEL_BASE for base in info.mro):
        return False
    # `class Label(SQLModel, table=True)`: a table class of its own or through a base class.
    for klass in info.mro:
        table = klass.defn.keywords.get("table")
        if isinstance(table, NameExpr) and table.fullname == "builtins.True":
            return True
    return False


class SQLModelColumns(Plugin):
    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        # The module that defines the column type must be loaded wherever a column is read.
        return [(10, INSTRUMENTED.rpartition(".")[0], -1)]

    def get_class_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        class_name, _, attribute = fullname.rpartition(".")
        found = self.lookup_fully_qualified(class_name)
        if found is None or not isinstance(found.node, TypeInfo) or attribute.startswith("_"):
            return None
        info = found.node
        member = info.names.get(attribute)
        if member is None or not isinstance(member.node, Var) or member.node.is_classvar:
            return None
        column = self.lookup_fully_qualified(INSTRUMENTED)
        if not _is_table_model(info) or column is None or not isinstance(column.node, TypeInfo):
            return None
        column_info = column.node

        def as_column(ctx: AttributeContext) -> Type:
            return Instance(column_info, [ctx.default_attr_type])

        return as_column


def plugin(version: str) -> type[Plugin]:
    return SQLModelColumns
