// Validates Kubernetes objects against Kubernetes' OpenAPI schemas as kubernetes-models ships
// them (types, required fields, enums, formats; offline). Reads a JSON array of objects on
// stdin (test_deploy.py turns the YAML into it), prints one line per object, exits 1 on any
// error. Unknown fields are not errors to these schemas: test_deploy.py checks those.
import { Namespace, ServiceAccount } from "kubernetes-models/v1";
import { DaemonSet } from "kubernetes-models/apps/v1";

const models = { "v1/Namespace": Namespace, "v1/ServiceAccount": ServiceAccount,
		 "apps/v1/DaemonSet": DaemonSet };
const chunks = [];
for await (const c of process.stdin)
	chunks.push(c);
let failed = 0;
for (const obj of JSON.parse(Buffer.concat(chunks).toString())) {
	const key = `${obj.apiVersion}/${obj.kind}`;
	const name = `${key} ${obj.metadata?.name}`;
	const Model = models[key];
	try {
		if (!Model)
			throw new Error(`no schema here for ${key}`);
		new Model(obj).validate();
		console.log(`valid ${name}`);
	} catch (e) {
		failed++;
		console.log(`INVALID ${name}: ${e.message}`);
	}
}
process.exit(failed ? 1 : 0);
