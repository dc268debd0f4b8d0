"""mypy plugin: a column of a SQLModel table read on the class is a SQLAlchemy column, not a value.

SQLModel declares `Label.met: bool`, which is what an instance holds; on the class itself SQLAlchemy
puts an instrumented attribute there (`Label.met == True` builds SQL). Without this plugin mypy
types every query expression as a plain bool or int and reports hundreds of false errors.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import MypyFile, NameExpr, TypeInfo, Var
from mypy.options import Options
from mypy.plugin import AttributeContext, ClassDefContext, Plugin
from mypy.plugins.common import add_attribute_to_class
from mypy.types import Instance, Type
from pydantic.mypy import PydanticPlugin

SQLMODEL_BASE = "sqlmodel.main.SQLModel"
INSTRUMENTED = "sqlalchemy.orm.attributes.InstrumentedAttribute"
TABLE = "sqlalchemy.sql.schema.Table"


METADATA_KEY = "sqlmodel_columns"


def _is_table_model(info: TypeInfo) -> bool:
    # Read from the metadata `_mark_tables` wrote, which mypy's cache keeps (a class definition's
    # keywords are not kept, so a module checked against a cached db.store.models would not see them).
    return any(klass.metadata.get(METADATA_KEY, {}).get("table") for klass in info.mro)


def _mark_tables(ctx: ClassDefContext) -> None:
    """`class Label(SQLModel, table=True)`: note that the class is a table, with its `__table__`."""
    table = ctx.cls.keywords.get("table")
    if isinstance(table, NameExpr) and table.fullname == "builtins.True":
        ctx.cls.info.metadata[METADATA_KEY] = {"table": True}
        table_type = ctx.api.named_type_or_none(TABLE)
        if table_type is not None and "__table__" not in ctx.cls.info.names:
            add_attribute_to_class(ctx.api, ctx.cls, "__table__", table_type, is_classvar=True)


class SQLModelColumns(Plugin):
    """Listed before pydantic's plugin: mypy asks plugins in order and takes the first base-class hook,
    so this one marks table classes and then hands the class to pydantic's hook as well."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.pydantic = PydanticPlugin(options)

    def set_modules(self, modules: dict[str, MypyFile]) -> None:
        super().set_modules(modules)
        self.pydantic.set_modules(modules)

    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        # The module that defines the column type must be loaded wherever a column is read.
        return [(10, INSTRUMENTED.rpartition(".")[0], -1), (10, TABLE.rpartition(".")[0], -1)]

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        pydantic_hook = self.pydantic.get_base_class_hook(fullname)
        if fullname != SQLMODEL_BASE:
            return pydantic_hook

        def mark_then_pydantic(ctx: ClassDefContext) -> None:
            _mark_tables(ctx)
            if pydantic_hook is not None:
                pydantic_hook(ctx)

        return mark_then_pydantic

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
