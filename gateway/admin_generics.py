"""The Django classes the admin uses that django-stubs makes generic (`ModelAdmin[ByokKey]`) for mypy only: at run
time they take no type arguments. These are the same classes for mypy; at run time, subclasses that accept the
arguments and drop them, so an admin module can name its model in its base classes."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin, TabularInline
    from django.core.paginator import Paginator
    from django.forms import BaseInlineFormSet, ModelForm
else:
    from django import forms
    from django.contrib import admin
    from django.core import paginator

    class _TypeArgumentsDropped:
        def __class_getitem__(cls, item: Any) -> type:
            return cls

    class ModelAdmin(_TypeArgumentsDropped, admin.ModelAdmin):
        pass

    class TabularInline(_TypeArgumentsDropped, admin.TabularInline):
        pass

    class ModelForm(_TypeArgumentsDropped, forms.ModelForm):
        pass

    class BaseInlineFormSet(_TypeArgumentsDropped, forms.BaseInlineFormSet):
        pass

    class Paginator(_TypeArgumentsDropped, paginator.Paginator):
        pass


__all__ = ["BaseInlineFormSet", "ModelAdmin", "ModelForm", "Paginator", "TabularInline"]
