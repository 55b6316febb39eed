import { render } from "preact";
import { App } from "./components/App";
import { applyTheme, storedTheme } from "./tools";
import "./styles.css";

applyTheme(storedTheme());
const root = document.getElementById("app");
if (root) render(<App />, root);
