// The relation of a step that Spark can explain without running anything: its kind's module says (src/runner/steps/).
export { explainableRel } from './steps/index.js';
