"""ClinConsensus Studio: the browser app. `streamlit run streamlit_app.py` (or `clinconsensus serve`).

Navigation is built from the signed-in user's role; every page checks the role again itself.
"""

import streamlit as st

from admin import shell
from admin.navigation import pages_for

st.set_page_config(page_title="ClinConsensus Studio", page_icon="🩺", layout="wide")

user = shell.current_user()
if user is None:
    navigation = st.navigation([st.Page(shell.login_page, title=shell.t("login.title"), url_path="login")])
else:
    shell.sidebar(user)
    navigation = st.navigation(pages_for(user))
navigation.run()
